(function(){
'use strict';
// The inspector's side of the page (`acp-bridge ui`): the list of captures, and the rows of
// the one chosen, fetched from the API as the capture grows and handed to the page's one
// renderer (page.js, window.acpPage). Only GETs to the page's own origin.
var page=window.acpPage, nav=document.getElementById('captures'), side=document.getElementById('side');
var title=document.getElementById('title'), body=document.body;
var chosen=null, run=0, listed=[];
nav.hidden=false;
function esc(s){return String(s===null||s===undefined?'':s).replace(/[&<>"]/g,function(c){return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function path(name){return name.split('/').map(encodeURIComponent).join('/');}
var ctl=null;  // aborts the requests (a long poll among them) of the capture left
function get(url,mine){
  return fetch(url,{credentials:'same-origin',cache:'no-store',signal:mine&&ctl?ctl.signal:undefined}).then(function(r){
    if(!r.ok)throw new Error(r.status+' '+url); return r.json();});
}
function pause(ms){return new Promise(function(ok){setTimeout(ok,ms);});}
function when(t){return typeof t==='number'?page.stamp(t):'';}  // the page's one way of writing a time

// The list of captures folds away to one line (remembered in this browser).
var folded=false; try{folded=localStorage.getItem('acp-bridge.captures-folded')==='1';}catch(e){}
function drawList(){
  var live=listed.filter(function(c){return c.live;}).length;
  var toggle='<button class="fold" type="button" title="'+(folded?'show':'hide')+' the list of captures">'+(folded?'▸':'▾')+' '+
    listed.length+' capture'+(listed.length===1?'':'s')+(live?', '+live+' live':'')+'</button>';
  nav.classList.toggle('folded',folded);
  body.setAttribute('data-captures',String(listed.length));
  body.setAttribute('data-captures-folded',folded?'1':'0');
  if(folded){nav.innerHTML=toggle+(chosen?' <span class="cnt">showing '+esc(chosen)+'</span>':'');return;}
  var h=[toggle,'<table><tr><th>capture</th><th>client</th><th>agent</th><th>started</th><th class="num">messages</th><th class="num">findings</th><th></th></tr>'];
  listed.forEach(function(c){
    h.push('<tr class="cap'+(c.name===chosen?' sel':'')+'" data-name="'+esc(c.name)+'"><td>'+esc(c.name)+'</td><td>'+esc(c.client)+
      '</td><td>'+esc(c.agent)+'</td><td>'+when(c.started)+'</td><td class="num">'+c.messages+'</td><td class="num">'+c.findings+
      '</td><td>'+(c.live?'<span class="live-badge">LIVE</span>':'')+'</td></tr>');
  });
  if(!listed.length)h.push('<tr><td colspan="7">no captures yet: a bridge run with --capture into a folder given to `acp-bridge ui` appears here</td></tr>');
  nav.innerHTML=h.join('')+'</table>';
}
nav.addEventListener('click',function(ev){
  if(ev.target.closest('button.fold')){
    folded=!folded; try{localStorage.setItem('acp-bridge.captures-folded',folded?'1':'0');}catch(e){}
    drawList(); return;
  }
  var tr=ev.target.closest('tr.cap'); if(tr)location.hash='c='+encodeURIComponent(tr.getAttribute('data-name'));
});

// Pause: the rows that come meanwhile are held (the capture is still read), and shown on resume.
var paused=false, waiting=[], pauseButton=document.getElementById('pause');
pauseButton.hidden=false;
function held(){return paused?new Promise(function(go){waiting.push(go);}):Promise.resolve();}
function setPaused(on){
  paused=on;
  pauseButton.textContent=paused?'resume':'pause'; pauseButton.classList.toggle('on',paused);
  body.setAttribute('data-paused',paused?'1':'0');
  if(!paused){var go=waiting;waiting=[];go.forEach(function(f){f();});}
}
pauseButton.addEventListener('click',function(){setPaused(!paused);});
function poll(){
  get('/api/captures').then(function(all){listed=all;drawList();
    if(chosen===null&&all.length&&!/[#&]c=/.test(location.hash))location.hash='c='+encodeURIComponent(all[0].name);
  }).catch(function(){}).then(function(){return pause(1000);}).then(poll);
}

function marksOf(report){
  var m=[];
  (report.findings||[]).forEach(function(f){(f.occurrences||[]).forEach(function(o){
    if(typeof o.seq==='number')m.push([o.seq,f.level,f.code,o.message]);});});
  return m.sort(function(a,b){return a[0]-b[0];});
}
function reports(name,mine){
  var base='/api/captures/'+path(name);
  return Promise.all([get(base+'/stats',mine),get(base+'/findings',mine)]).then(function(both){
    if(mine!==run)return;
    page.side(both[0],both[1]); page.marks(marksOf(both[1]));
  });
}

// The rows of `name`, from the first on, then as they come (a long poll holds until the
// capture grows); a capture read again from its start (new generation) starts the page over.
function follow(name,mine){
  var generation=null, base='/api/captures/'+path(name), checked=0, seen=-1, folding=0;
  function step(){
    if(mine!==run)return;
    var caught=generation!==null&&body.getAttribute('data-caught')==='1';
    get(base+'/rows?after='+page.rows()+'&seen='+folding+'&wait='+(caught?10:0)+
        (generation===null?'':'&generation='+generation),mine).then(function(data){
      if(paused)body.setAttribute('data-held',String(data.rows.length+(data.pending?1:0)));  // come, not shown
      return held().then(function(){body.removeAttribute('data-held');return data;});
    }).then(function(data){
      if(mine!==run)return;
      if(data.generation!==generation){
        generation=data.generation;
        page.reset({messages:data.messages,turns:data.turns,bridge:data.bridge,started:data.started,title:name});
        if(data.start!==0)return step();
      }
      page.summary({messages:data.messages,turns:data.turns,bridge:data.bridge,started:data.started,title:name});
      if(!page.feed(data.start,data.rows,data.pending)){generation=null;return step();}
      folding=data.pending?(data.pending.s2||data.pending.s):0;
      var done=data.start+data.rows.length>=data.total;
      body.setAttribute('data-caught',done?'1':'0');
      var now=Date.now();
      if(done&&data.messages!==seen&&now-checked>3000){checked=now;seen=data.messages;reports(name,mine).catch(function(){});}
      if(done&&body.getAttribute('data-live-ready')!=='1'){
        body.setAttribute('data-live-ready','1');
        var mm=/[#&]m=(\d+)/.exec(location.hash); if(mm)page.go(+mm[1]);
      }
      held().then(step);
    }).catch(function(){
      if(mine!==run)return;
      body.setAttribute('data-gone',name);
      pause(1000).then(step);
    });
  }
  step();
}

// The messages a folded row stands for, fetched when the pane opens it: records with seq
// from `first` to `last`, at most `most`, a page of the messages API at a time.
function members(name,mine){
  var base='/api/captures/'+path(name);
  return function(first,last,most){
    var out=[];
    function more(after){
      return get(base+'/messages?after='+after+'&limit='+Math.min(1000,most-out.length),mine).then(function(recs){
        recs.forEach(function(r){if(r.seq<=last&&out.length<most)out.push(r);});
        var end=recs.length?recs[recs.length-1].seq:last;
        return end>=last||!recs.length||out.length>=most?out:more(end);
      });
    }
    return more(first-1);
  };
}

function choose(){
  var m=/[#&]c=([^&]*)/.exec(location.hash), name=m?decodeURIComponent(m[1]):null;
  if(name===chosen)return;
  chosen=name; run++;
  if(paused)setPaused(false);  // another capture: shown from its start
  if(ctl)ctl.abort();
  ctl=new AbortController();
  body.removeAttribute('data-live-ready'); body.setAttribute('data-caught','0');
  body.setAttribute('data-capture',name||'');
  title.textContent=name||'live';
  drawList();
  page.reset({messages:0,turns:0,bridge:'?',started:'?',title:name});
  if(name!==null)page.loader(members(name,run));
  side.hidden=true; side.innerHTML='';
  if(name!==null)follow(name,run);
}
var mq=/[#&]q=([^&]*)/.exec(location.hash);
if(mq)document.getElementById('q').value=decodeURIComponent(mq[1].replace(/\+/g,' '));
window.addEventListener('hashchange',choose);
choose();
poll();
body.setAttribute('data-ready','1');
})();
